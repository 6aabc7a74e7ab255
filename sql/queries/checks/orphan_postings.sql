-- Postings whose chunk is gone. Parameters: namespace id.
-- One pass over the postings' chunk index (grouped by chunk), then one primary-key lookup per
-- distinct chunk: the LIMIT keeps the lookup a per-row subplan, so the planner cannot make it an
-- anti-join that, with the statistics of a namespace just written (one row estimated), scanned
-- every chunk for every posting (12 minutes after a 45 MB file).
SELECT coalesce(sum(p.n), 0)::bigint
FROM (
  SELECT namespace_id, chunk_id, count(*) AS n
  FROM kbctl.lexical_postings
  WHERE namespace_id = %s
  GROUP BY namespace_id, chunk_id
) p
WHERE (SELECT c.id FROM kbctl.chunks c WHERE c.namespace_id = p.namespace_id AND c.id = p.chunk_id LIMIT 1) IS NULL
