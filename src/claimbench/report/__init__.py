"""What readers see: the list (publish), the audit, the table, the site. One judgement (standing) for
all of them. No heavy imports."""
