-- Audit rows past retention.
-- Parameters: retention in days.
DELETE FROM kbctl.search_audit WHERE at < now() - make_interval(days => %s)
