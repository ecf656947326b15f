-- Placeholder kept by branch 'offer' so its 0018 applies (migrations may have no gaps):
-- another branch takes 0016; drop this file when merging.
SELECT 1;
