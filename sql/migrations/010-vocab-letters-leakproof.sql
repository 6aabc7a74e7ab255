-- Typo correction under row-level security (migration 009). Its candidates are found through the
-- letter indexes of migration 003, on left(term, 1) and substr(term, 2, 1). Once a table has a
-- policy, PostgreSQL uses a condition as an index condition only if every function in it is
-- leakproof, and left() and substr() are not: the indexes went unused and each correction filtered
-- the namespace's whole vocabulary (the correction step's total over 300 SciFact queries 115 →
-- 299 ms). The letters as stored columns are compared with texteq, which is leakproof.
ALTER TABLE kbctl.lexical_vocab ADD COLUMN first_letter text GENERATED ALWAYS AS (left(term, 1)) STORED;
ALTER TABLE kbctl.lexical_vocab ADD COLUMN second_letter text GENERATED ALWAYS AS (substr(term, 2, 1)) STORED;
DROP INDEX kbctl.lexical_vocab_first;
DROP INDEX kbctl.lexical_vocab_second;
CREATE INDEX lexical_vocab_first ON kbctl.lexical_vocab (namespace_id, first_letter);
CREATE INDEX lexical_vocab_second ON kbctl.lexical_vocab (namespace_id, second_letter);
ANALYZE kbctl.lexical_vocab;
