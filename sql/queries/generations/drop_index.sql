-- A generation's HNSW index, once its generation is gone. Template: how (CONCURRENTLY outside a
-- transaction: SHARE UPDATE EXCLUSIVE on kbctl.vectors, so every namespace's searches and writes
-- go on; empty inside one: ACCESS EXCLUSIVE until the transaction ends), name the index.
DROP INDEX {how} IF EXISTS kbctl.{name}
