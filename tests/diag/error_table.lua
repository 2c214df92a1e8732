-- a spec may raise any value: the error names its type and line
error({})
