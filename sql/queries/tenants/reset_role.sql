-- Back to the role the session logged in as.
RESET ROLE
