"""Tools that run on a schedule (seed 004 ``trigger: {type: cron}``): the one background task that
fires them, and what a run does with its output. Their cron expressions are ``sidecar/cron.py``'s."""
