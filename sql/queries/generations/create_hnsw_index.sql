-- The partial HNSW index of one generation's vectors, typed to its dimension and storage.
-- Template: how (empty, or CONCURRENTLY: a shadow's index is built after its vectors, without
-- blocking other writers), name the index, col the column (embedding or half), typ its type (vector
-- or halfvec), dim the dimension, ops the operator class, m and efc the build parameters, gid the
-- generation id.
CREATE INDEX {how} IF NOT EXISTS {name} ON kbctl.vectors USING hnsw
  (({col}::{typ}({dim})) {ops}) WITH (m = {m}, ef_construction = {efc})
  WHERE generation_id = {gid}
