-- Act as a role for the rest of the session (or until the next SET ROLE). Template: role.
SET ROLE {role}
