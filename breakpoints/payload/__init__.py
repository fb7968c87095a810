"""What an agent sends: the payload's keys checked (validation) and the form it may declare,
a JSON Schema (form_schema, with its dialects and the work its subschemas can make)."""
