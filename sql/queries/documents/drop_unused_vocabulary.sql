-- Terms no document of the namespace holds any more (df 0, left by subtract_vocabulary during a
-- run), dropped once the run's writes are done. Parameters: namespace id.
DELETE FROM kbctl.lexical_vocab WHERE namespace_id = %s AND df <= 0
