-- pgvector's type asks for EXTERNAL storage, so once a chunk's row passed the 2 kB TOAST threshold
-- (a 384-d vector is 1.5 kB, so almost every chunk with its text) the vector was moved out of line:
-- 99.4% of them at 10k SciFact chunks. Every distance the exact path computes and every distance
-- the HNSW path returns then cost a TOAST index lookup and heap read (~5 buffers per row). MAIN
-- keeps the vector in the row and lets the text be compressed or moved out instead. Rows written
-- before this migration keep their layout until rewritten (`kbctl db optimize --full`).
ALTER TABLE kbctl.chunks ALTER COLUMN embedding SET STORAGE MAIN;
