-- This number holds no change of the schema: a placeholder kept so that the numbered migrations run
-- without a gap. Replace it with the migration that takes this number.
SELECT 1;
