-- Serialize the creation of one tenant's role: concurrent first uses (the stages of a pipe, two
-- ingests) would otherwise both find no role and both CREATE ROLE. Held to the end of the
-- transaction. Parameters: tenant.
SELECT pg_advisory_xact_lock(hashtextextended('kbctl.tenant:' || %s, 0))
