-- One audited search.
-- Parameters: tenant, namespace ids, principal (user:<id> or anonymous), groups, query hash,
-- strategy, hits returned, hits withheld.
INSERT INTO kbctl.search_audit (tenant, namespace_ids, principal, groups, query_hash, strategy, returned, withheld)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
