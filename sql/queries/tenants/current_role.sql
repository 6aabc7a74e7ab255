-- The role the session acts as now.
SELECT current_user
