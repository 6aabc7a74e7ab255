-- Audit log of searches made as a principal ([audit] enabled = true): who, when, which namespaces,
-- a hash of the query (never its text), how many hits were returned and withheld. Rows older than
-- [audit] retention_days are deleted by kbctl.
CREATE TABLE kbctl.search_audit (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    tenant        text        NOT NULL,
    namespace_ids integer[]   NOT NULL,
    principal     text        NOT NULL,
    groups        text[]      NOT NULL DEFAULT '{}',
    query_hash    text        NOT NULL,
    strategy      text        NOT NULL,
    returned      integer     NOT NULL,
    withheld      integer     NOT NULL
);
CREATE INDEX search_audit_at ON kbctl.search_audit (at);
CREATE INDEX search_audit_tenant ON kbctl.search_audit (tenant, at);
