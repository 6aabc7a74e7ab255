-- The agent surface (kbctl serve / kbctl mcp): bearer tokens of agents, the opt-in query log
-- ([server] log_queries) and the judgments agents attach to logged queries (record_feedback).
-- A token is stored as its sha256 only; `kbctl agents token create NAME` prints it once.
CREATE TABLE kbctl.agent_tokens (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant      text        NOT NULL,
    agent       text        NOT NULL,
    token_hash  text        NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX agent_tokens_agent ON kbctl.agent_tokens (tenant, agent);

-- One logged query: who asked (agent), through which tool, over which namespaces, and the
-- documents it returned as [[namespace_id, document_id], ...] (what feedback may judge).
CREATE TABLE kbctl.query_log (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    tenant        text        NOT NULL,
    agent         text        NOT NULL,
    tool          text        NOT NULL,
    namespace_ids integer[]   NOT NULL,
    query         text        NOT NULL,
    results       jsonb       NOT NULL DEFAULT '[]'
);
CREATE INDEX query_log_tenant ON kbctl.query_log (tenant, at);

CREATE TABLE kbctl.query_feedback (
    query_id     bigint      NOT NULL REFERENCES kbctl.query_log (id) ON DELETE CASCADE,
    namespace_id integer     NOT NULL REFERENCES kbctl.namespaces (id) ON DELETE CASCADE,
    document_id  bigint      NOT NULL,
    useful       boolean     NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, namespace_id, document_id)
);
