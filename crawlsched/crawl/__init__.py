"""The crawl of one batch: its states (`batch`), the loop over its pages (`loop`), the driver
calls beside it (`lanes`), its parts recorded as it goes (`parts`, `records`), and what it runs
on (`resources`). Which pages it crawls, of which hosts, and when, is the frontier's
(`crawlsched.frontier`)."""
