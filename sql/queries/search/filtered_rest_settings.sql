-- The settings search/filtered_rest runs under (in its own transaction). It reads the chunks after
-- the probe's last key in chunks_pkey's order, stopping at the limit; the planner, which takes the
-- filters for rarer than they are, read every chunk of the namespaces (a bitmap of chunks_document)
-- and sorted them by key first. No sort: the key's index is the one order left.
SELECT set_config('enable_sort', 'off', true), set_config('enable_incremental_sort', 'off', true)
