-- The partial HNSW index of one profile's vectors, typed to its dimension.
-- Template: name the index, dim the dimension, ops the operator class, m and efc the build
-- parameters, pid the profile id.
CREATE INDEX IF NOT EXISTS {name} ON kbctl.chunks USING hnsw
  ((embedding::vector({dim})) {ops}) WITH (m = {m}, ef_construction = {efc})
  WHERE profile_id = {pid}
