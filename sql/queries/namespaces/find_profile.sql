-- A recorded profile by fingerprint. Parameters: fingerprint.
SELECT id FROM kbctl.profiles WHERE fingerprint = %s
