-- A generation's HNSW index, once its generation is gone. Template: name the index.
DROP INDEX IF EXISTS kbctl.{name}
