"""The machinery the scripts share: flags, timing, records, printers, saving, judging, drawing."""
