-- Whether a namespace holds no document and no run in the ledger. Parameters: namespace id, namespace id.
SELECT NOT EXISTS (SELECT 1 FROM kbctl.documents WHERE namespace_id = %s)
   AND NOT EXISTS (SELECT 1 FROM kbctl.runs WHERE namespace_id = %s)
