-- How many chunks of a namespace have ids in (lo, hi]. Parameters: namespace id, lo, hi.
SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s AND id > %s AND id <= %s
