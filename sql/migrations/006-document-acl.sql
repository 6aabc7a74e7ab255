-- Who may view a document: its access-control list, entries 'public', 'user:<id>', 'group:<name>'.
-- NULL: the document carries no ACL, and its namespace's acl_default (public | deny) decides.
-- acl_explicit: the ACL came with the document itself (front matter, a record's field) rather than
-- from the namespace's configuration (path rules, e-mail recipients), which kbctl re-applies after
-- every ingest. Chunks inherit their document's ACL through the join every hit is read with; the
-- gate runs after ranking (kbctl.acl), so no index serves this column.
ALTER TABLE kbctl.documents ADD COLUMN acl text[];
ALTER TABLE kbctl.documents ADD COLUMN acl_explicit boolean NOT NULL DEFAULT false;
