-- Terms no document of the namespace holds any more. Parameters: namespace id.
DELETE FROM kbctl.lexical_vocab WHERE namespace_id = %s AND df <= 0
