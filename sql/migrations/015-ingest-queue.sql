-- The work queue of a run shared by several workers (`kbctl ingest --workers N`, `kbctl worker`).
--
-- The coordinator of a run (the process that opened its row in kbctl.runs and holds the
-- namespace's ingest lock) enumerates the run's items here: one row per file of the folders walked,
-- per URL or feed given. Workers claim a few at a time with FOR UPDATE SKIP LOCKED, each claim
-- leased until `claimed_until`; a worker renews its leases while it works and marks its items
-- done (or failed) when they are stored. A killed worker's items come back when their lease
-- expires; storing is idempotent by source hash (an item stored before its worker died is found
-- unchanged), so a run converges whoever stores what.
--
-- Kept healthy under a long transaction elsewhere (which holds back vacuum): an item's row is
-- updated twice in the common case (claimed, done) plus once per lease renewal, and no updated
-- column is indexed, so the updates are HOT and fit in the page (fillfactor 50); a claim reads the
-- table through its primary key from the lowest item a worker has not yet seen done (`item >= %s`),
-- not from the start of the run.
CREATE TABLE kbctl.run_items (
    namespace_id  integer     NOT NULL,
    run_id        bigint      NOT NULL,
    item          integer     NOT NULL,              -- position in the run, from 0
    target        text        NOT NULL,              -- a file's absolute path, a URL
    rel           text,                              -- a walked file's path in its folder (its `path` metadata)
    state         text        NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'done', 'failed')),
    worker        text,                              -- who claimed it last
    claimed_until timestamptz,
    attempts      integer     NOT NULL DEFAULT 0,
    counts        jsonb,                             -- what the batch it led did (the run's counts are their sum)
    PRIMARY KEY (namespace_id, run_id, item),
    FOREIGN KEY (namespace_id, run_id) REFERENCES kbctl.runs (namespace_id, id) ON DELETE CASCADE
) WITH (fillfactor = 50);

ALTER TABLE kbctl.run_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.run_items FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.run_items USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

GRANT SELECT, INSERT, UPDATE, DELETE ON kbctl.run_items TO kbctl_tenant;
