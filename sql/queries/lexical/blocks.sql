-- Blocks by key. The keys come as comma-separated lists (one short string each, not thousands of
-- array elements to encode): namespace ids, indexes into the terms, segments, blocks; then the terms.
SELECT b.namespace_id, b.term, b.segment, b.block, b.chunk_ids, b.tfs, b.dls
FROM unnest(string_to_array(%s, ',')::int[], string_to_array(%s, ',')::int[],
            string_to_array(%s, ',')::int[], string_to_array(%s, ',')::int[]) AS k(namespace_id, t, segment, block)
JOIN kbctl.lexical_blocks b
  ON b.namespace_id = k.namespace_id AND b.term = (%s::text[])[k.t] AND b.segment = k.segment AND b.block = k.block
