-- A settled batch's counts, on the first item it settled. Parameters: counts (JSON), namespace id,
-- run id, item.
UPDATE kbctl.run_items SET counts = %s::jsonb WHERE namespace_id = %s AND run_id = %s AND item = %s
