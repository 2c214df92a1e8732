-- specs do not print
print("hello")
