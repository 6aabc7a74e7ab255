-- The memory an index build may use, for this session until reset (a concurrent build runs outside
-- a transaction, so SET LOCAL would not reach it). Parameters: the amount ('1024MB').
SELECT set_config('maintenance_work_mem', %s, false)
