-- How many of a namespace's chunks have ids above a watermark (the unpacked tail), counted up to a limit.
-- Parameters: namespace id, watermark, limit.
SELECT count(*) FROM (
    SELECT 1 FROM kbctl.chunks WHERE namespace_id = %s AND id > %s LIMIT %s
) t
