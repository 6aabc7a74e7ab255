-- Remove the document frequencies of these documents' chunks from the vocabulary.
-- Parameters: namespace id, document ids, namespace id.
WITH old AS (
  SELECT p.term, count(*) AS n
  FROM kbctl.lexical_postings p
  JOIN kbctl.chunks c ON c.namespace_id = p.namespace_id AND c.id = p.chunk_id
  WHERE c.namespace_id = %s AND c.document_id = ANY(%s)
  GROUP BY p.term
)
UPDATE kbctl.lexical_vocab v SET df = v.df - old.n
FROM old
WHERE v.namespace_id = %s AND v.term = old.term
