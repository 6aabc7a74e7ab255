-- A new bearer token of an agent (its sha256 only). Parameters: tenant, agent, token hash.
INSERT INTO kbctl.agent_tokens (tenant, agent, token_hash) VALUES (%s, %s, %s) RETURNING id
