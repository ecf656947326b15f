"""Tools that run on a schedule (seed 004 ``trigger: {type: cron}``): cron expressions, the one
background task that fires them, and what a run does with its output."""
