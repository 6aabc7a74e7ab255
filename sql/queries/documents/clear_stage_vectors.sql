-- Empty the session's stage table of vectors once its rows are moved: a large document is written in
-- many batches inside one transaction, and the moved rows' dead versions would otherwise stay
-- until commit, for every later batch's move to read again.
TRUNCATE pg_temp.stage_vectors
