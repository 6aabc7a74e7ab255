-- Each stored source's hash and the documents it produced (sources stored from one version only).
-- Parameters: namespace id, source URIs.
SELECT source_uri, min(source_hash), array_agg(uri)
FROM kbctl.documents
WHERE namespace_id = %s AND source_uri = ANY(%s)
GROUP BY source_uri
HAVING count(DISTINCT source_hash) = 1
