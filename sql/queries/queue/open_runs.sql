-- Running runs of the namespaces with items to claim, oldest first. Parameters: namespace ids.
SELECT r.namespace_id, r.id FROM kbctl.runs r
WHERE r.namespace_id = ANY(%s) AND r.status = 'running'
  AND EXISTS (SELECT 1 FROM kbctl.run_items q WHERE q.namespace_id = r.namespace_id AND q.run_id = r.id
                AND q.state IN ('queued', 'claimed'))
ORDER BY r.started_at, r.id
