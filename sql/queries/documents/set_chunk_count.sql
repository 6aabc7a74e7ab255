-- A document written in batches (a large one) declares its chunks once the last batch is in.
-- Parameters: chunk count, namespace id, document id.
UPDATE kbctl.documents SET chunk_count = %s WHERE namespace_id = %s AND id = %s
