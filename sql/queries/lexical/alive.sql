-- Which of the given chunks still exist (a packed chunk may have been deleted since). The keys
-- come as comma-separated lists: namespace ids, chunk ids.
SELECT c.id
FROM unnest(string_to_array(%s, ',')::int[], string_to_array(%s, ',')::bigint[]) AS k(namespace_id, id)
JOIN kbctl.chunks c ON c.namespace_id = k.namespace_id AND c.id = k.id
