"""The audit export's files, each written from the same content: the PDF (WeasyPrint), the workbook
(openpyxl), the CSV files and the JSON document with its schema, gathered into one zip with SHA256SUMS."""
