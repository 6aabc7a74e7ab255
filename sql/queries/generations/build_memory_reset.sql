-- Back to the server's maintenance_work_mem after an index build. No parameters.
RESET maintenance_work_mem
