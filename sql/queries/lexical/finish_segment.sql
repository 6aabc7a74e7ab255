-- Record what a segment holds. Parameters: chunks, postings, namespace id, segment.
UPDATE kbctl.lexical_segments SET chunks = %s, postings = %s WHERE namespace_id = %s AND segment = %s
