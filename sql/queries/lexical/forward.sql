-- A segment's forward index (migration 017): its dictionary, each ordinal's offsets, and the
-- entries' term ids and tfs (big-endian int4, int4 and float4). No row: packed before migration 017.
-- Parameters: namespace id, segment.
SELECT terms, offsets, term_ids, tfs FROM kbctl.lexical_forward WHERE namespace_id = %s AND segment = %s
