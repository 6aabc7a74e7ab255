-- A segment's chunks by ordinal: their ids (int8) and lengths (float4), big-endian arrays.
-- Parameters: namespace id, segment.
SELECT chunk_ids, dls FROM kbctl.lexical_docs WHERE namespace_id = %s AND segment = %s
