-- Reserve ids from a table's serial sequence. Parameters: qualified table name, how many.
SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)
