-- Typo correction looks for vocabulary terms that share the misspelled word's first or second
-- letter. These two indexes answer that with a BitmapOr over a few thousand entries instead of
-- filtering the namespace's whole vocabulary (34k terms at 100k chunks: 17 ms → ~2 ms).
CREATE INDEX lexical_vocab_first ON kbctl.lexical_vocab (namespace_id, left(term, 1));
CREATE INDEX lexical_vocab_second ON kbctl.lexical_vocab (namespace_id, substr(term, 2, 1));
