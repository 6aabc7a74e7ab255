-- kbctl's schema, before its first migration.
CREATE SCHEMA IF NOT EXISTS kbctl
