-- When an episodic memory's event happened (valid time), beside created_at (when memql learned
-- it). Optional: facts and procedures have no event time.
alter table memories add column occurred_at timestamptz;
